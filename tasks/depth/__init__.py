"""RGB-D pretext tasks: depth ordering of marked points (Visual Jigsaw 3D), regional depth ordering and relative
3D position (Spatial-SSRL). Each shows the RGB image with numbered markers; the answers come from the depth."""

from tasks.depth.common import RGBD
from tasks.depth.depth_order import DepthOrder
from tasks.depth.regional_depth_order import RegionalDepthOrder
from tasks.depth.relative_position import RelativePosition3D

__all__ = ["RGBD", "DepthOrder", "RegionalDepthOrder", "RelativePosition3D"]
