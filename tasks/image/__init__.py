"""Image pretext tasks: rotation, jigsaw and Jigsaw-R1's pair, multiple-choice, single-piece and box questions,
Spatial-SSRL's patch reordering, flipped patch and crop inpainting, SSL4RL's patch position and contrastive pairs."""

from tasks.image.contrastive import Contrastive
from tasks.image.crop_inpaint import CropInpaint
from tasks.image.flipped_patch import FlippedPatch
from tasks.image.jigsaw import Jigsaw
from tasks.image.jigsaw_box import JigsawBox
from tasks.image.jigsaw_multiple import JigsawMultiple
from tasks.image.jigsaw_pair import JigsawPair
from tasks.image.jigsaw_single import JigsawSingle
from tasks.image.patch_position import PatchPosition
from tasks.image.patch_reorder import PatchReorder
from tasks.image.rotation import Rotation

__all__ = ["Contrastive", "CropInpaint", "FlippedPatch", "Jigsaw", "JigsawBox", "JigsawMultiple", "JigsawPair",
           "JigsawSingle", "PatchPosition", "PatchReorder", "Rotation"]
