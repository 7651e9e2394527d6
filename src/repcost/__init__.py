"""repcost: experiments on the representation cost of weight-decay-trained networks."""

__version__ = "0.1.0"
