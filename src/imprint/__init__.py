"""imprint: did this text leave an imprint on this language model?"""

__version__ = "0.1.0"
