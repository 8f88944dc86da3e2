"""zoo: multimodal policies as LightningModules, GRPO and SFT as Lightning strategies, offline tiny
models.

Every module is imported here and its classes re-exported (``zoo.QwenVLPolicy`` on the command
line), a new policy family file included. Left out: the CLI (it imports `callbacks`, which import
`zoo.grpo`) and the command-line tools (`zoo.tools`), which nothing builds from a config.
"""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals(), skip=("cli", "tools"))
