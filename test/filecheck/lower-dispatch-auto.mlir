// lower-dispatch with `auto`: per-bucket winners become one runtime selection op.
//
// A given table (VLLM_XDSL_TUNE_TABLE: tuned on the target machine), lowering for cuda
// here, where nothing can be measured: rms_norm has different winners per bucket ->
// auto.rms_norm; silu_and_mul has one winner -> its provider op; a static token count
// (8 tokens) has one bucket -> lowered as its winner (native decomposition).
// RUN: env VLLM_XDSL_TUNE_TABLE=%S/Inputs/lower-dispatch-auto.table.json VLLM_XDSL_TUNE_MAX_TOKENS=8 VLLM_XDSL_CACHE_DIR=%t.none vllm-opt %s --lower-dispatch="target=cuda priority=triton,auto report=true" 2>%t.report | filecheck %s --check-prefix=TABLE
// RUN: filecheck %s --check-prefix=REPORT < %t.report
//
// Measured here (cpu, with Triton's interpreter as a candidate): the interpreter is far
// slower, so native wins every bucket and no selection is needed at run time.
// RUN: rm -rf %t.cache
// RUN: env TRITON_INTERPRET=1 VLLM_XDSL_TUNE_MAX_TOKENS=2 VLLM_XDSL_CACHE_DIR=%t.cache vllm-opt %s --lower-dispatch="target=cpu priority=rms_norm=triton,auto;silu_and_mul=native report=true" 2>%t.cpu | filecheck %s --check-prefix=CPU
// RUN: filecheck %s --check-prefix=CPU-REPORT < %t.cpu
//
// Error (one line): nothing to measure on and no table (more in test/test_autotune_units.py).
// RUN: not env VLLM_XDSL_CACHE_DIR=%t.none vllm-opt %s --lower-dispatch="target=cuda priority=rms_norm=auto" 2>&1 | filecheck %s --check-prefix=NO-DEVICE

func.func @layer(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %g: tensor<?x8192xbf16>, %x8: tensor<8x4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<8x4096xbf16>) {
  %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %m = vllm.silu_and_mul %g : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
  %y8 = vllm.rms_norm %x8 weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64} : tensor<8x4096xbf16> -> tensor<8x4096xbf16>
  func.return %y, %m, %y8 : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<8x4096xbf16>
}

// TABLE-LABEL: func.func @layer
// TABLE-NEXT:    %y = auto.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, tokens = array<i64: 1, 2, 4, 8>, winners = ["triton", "triton", "native", "native"]} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
// TABLE-NEXT:    %m = triton.silu_and_mul %g {block_size = {{[0-9]+}} : i64{{.*}}} : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
// TABLE-NEXT:    %y8_t = torch.call "prims::convert_element_type.default"(%x8)
// TABLE-NOT:     vllm.
// TABLE:         func.return %y, %m, %y8

// REPORT:      @layer %y: rms_norm -> auto
// REPORT:          note: auto: runtime selection over 4 token bucket(s)
// REPORT-NEXT:     note: auto T<=1: triton (given table) [triton 5.0 us, native 6.0 us]
// REPORT-NEXT:     note: auto T<=2: triton (given table) [triton 6.0 us, native 9.0 us]
// REPORT-NEXT:     note: auto T<=4: native (given table) [triton 8.0 us, native 15.0 us]
// REPORT:      @layer %m: silu_and_mul -> triton
// REPORT:          note: auto: triton wins every bucket (T<=1..8): no runtime selection
// REPORT:      @layer %y8: rms_norm -> native
// REPORT:          note: auto: native wins every bucket (T<=8): no runtime selection

// CPU-LABEL: func.func @layer
// CPU-NOT:     auto.
// CPU-NOT:     triton.
// CPU:         func.return
// CPU-REPORT:      @layer %y: rms_norm -> native
// CPU-REPORT-NEXT:     rejected triton: slower in every bucket
// CPU-REPORT-NEXT:     note: auto: native wins every bucket (T<=1..2): no runtime selection
// CPU-REPORT-NEXT:     note: auto T<=1: native [native {{[0-9.]+}} us, triton {{[0-9.]+}} us]
// CPU-REPORT-NEXT:     note: auto T<=2: native [native {{[0-9.]+}} us]; triton not measured: over 8x slower than native at T<=1

// NO-DEVICE: error: @layer %y: rms_norm: priority 'auto' for rms_norm T<=1 x=bfloat16[T,4096] weight=bfloat16[4096] epsilon=float variance_size=None: there is no cuda device here to measure on (tune on the target machine and pass its table in VLLM_XDSL_TUNE_TABLE, or name the providers)
// NO-DEVICE-NOT: Traceback
