"""GUI and embodied inverse dynamics (UI-Shift) and GUI grounding, with the items they consume."""

from tasks.gui.common import FramePair, GUITransition, Node
from tasks.gui.embodied import EmbodiedInverseDynamics
from tasks.gui.grounding import GUIGrounding
from tasks.gui.inverse_dynamics import GUIInverseDynamics

__all__ = ["EmbodiedInverseDynamics", "FramePair", "GUIGrounding", "GUIInverseDynamics", "GUITransition", "Node"]
