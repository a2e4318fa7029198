"""IR -> torch: export a module back to a `torch.fx.GraphModule` (see exporter.py)."""

from .exporter import export_module
from .literals import ExportError

__all__ = ["ExportError", "export_module"]
