"""Pictures of register layouts: a scene of rectangles and text, written as SVG or PNG."""

from smalti.tools.pictures.draw import WARP_COLOURS, layout_scene, relayout_scene
from smalti.tools.pictures.png import scene_to_png
from smalti.tools.pictures.scene import Group, Rect, Scene, Text
from smalti.tools.pictures.svg import scene_to_svg

__all__ = [
    "WARP_COLOURS", "Group", "Rect", "Scene", "Text", "layout_scene", "relayout_scene",
    "scene_to_png", "scene_to_svg",
]
