"""EvenHand: measure, explain and reduce asymmetric demographic bias in LLM decisions."""

__version__ = "0.1.0"
