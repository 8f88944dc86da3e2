"""Point-cloud pretext tasks: rotation prediction and slab jigsaw."""

from tasks.pointcloud.common import PointCloud
from tasks.pointcloud.jigsaw import PointCloudJigsaw
from tasks.pointcloud.rotation import PointCloudRotation

__all__ = ["PointCloud", "PointCloudJigsaw", "PointCloudRotation"]
