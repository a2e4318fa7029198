"""The corpus as measured: per case, sites raised/total per type, fused ops formed/possible,
compiled graphs, and whether the compiled output equals eager bit for bit ("exact") or only
within tolerance ("close"; "close (softmax decomposition)": bit-exact once torch's softmax
decomposition is not applied, corpus.decomps). "-": no totals (compressed-tensors' stock
forward, see corpus.harness.Built).

A change in the pipeline that changes a row fails test/test_corpus.py; to accept it (an
improvement), replace EXPECTED with the output of
    python bench/corpus_table.py --expectations
and update the README's table (--markdown).
"""

EXPECTED = {
    'llama/f32':                    'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'llama/bf16':                   'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'qwen2/f32':                    'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'qwen2/bf16':                   'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'qwen3/f32':                    'norm 5/5 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'qwen3/bf16':                   'norm 5/5 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'mistral/f32':                  'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'mistral/bf16':                 'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'gemma/f32':                    'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'gemma/bf16':                   'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'gemma2/f32':                   'norm 5/5 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 close (softmax decomposition)',
    'gemma2/bf16':                  'norm 5/5 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'gemma3/f32':                   'norm 7/7 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 close (softmax decomposition)',
    'gemma3/bf16':                  'norm 7/7 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'phi3/f32':                     'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'phi3/bf16':                    'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'qwen2moe/f32':                 'norm 3/3 add 2/2 act 2/2 quant 0/0 fused 0/0 graphs 1 close (softmax decomposition)',
    'qwen2moe/bf16':                'norm 3/3 add 2/2 act 2/2 quant 0/0 fused 0/0 graphs 1 exact',
    'mixtral/f32':                  'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 close (softmax decomposition)',
    'mixtral/bf16':                 'norm 3/3 add 2/2 act 1/1 quant 0/0 fused 0/0 graphs 1 exact',
    'ct-FP8-stock/bf16':            'norm 3/- add 1/- act 0/- quant 8/- fused 0/- graphs 16 exact',
    'ct-FP8-fused/bf16':            'norm 3/3 add 2/2 act 1/1 quant 7/7 fused 6/6 graphs 1 exact',
    'ct-FP8_DYNAMIC-fused/bf16':    'norm 3/3 add 2/2 act 1/1 quant 7/7 fused 6/6 graphs 1 exact',
    'ct-W8A8-stock/bf16':           'norm 3/- add 1/- act 0/- quant 4/- fused 0/- graphs 16 exact',
    'ct-W8A8-fused/bf16':           'norm 3/3 add 2/2 act 1/1 quant 7/7 fused 6/6 graphs 1 exact',
    'ct-FP8_BLOCK-fused/bf16':      'norm 3/3 add 2/2 act 1/1 quant 7/7 fused 6/6 graphs 1 exact',
    'vllm-norm/f32':                'norm 2/2 add 1/1 act 0/0 quant 0/0 fused 0/0 graphs 1 exact',
    'vllm-norm/bf16':               'norm 2/2 add 1/1 act 0/0 quant 0/0 fused 0/0 graphs 1 exact',
    'vllm-quant-static/f32':        'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-static/bf16':       'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-per_token/f32':     'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-per_token/bf16':    'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-per_token_ub/f32':  'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-per_token_ub/bf16': 'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-per_tensor/f32':    'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 0/0 graphs 1 exact',
    'vllm-quant-per_tensor/bf16':   'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 0/0 graphs 1 exact',
    'vllm-quant-group/f32':         'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-group/bf16':        'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-group_ue8m0/f32':   'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-group_ue8m0/bf16':  'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-group_col/f32':     'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-quant-group_col/bf16':    'norm 2/2 add 1/1 act 1/1 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-act/f32':                 'norm 0/0 add 0/0 act 3/3 quant 3/3 fused 3/3 graphs 1 exact',
    'vllm-act/bf16':                'norm 0/0 add 0/0 act 3/3 quant 3/3 fused 3/3 graphs 1 exact',
}
