"""Tests of :mod:`graphengine.plot`, and their check of a written figure."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    """``path`` is a PNG file (its signature) that matplotlib decodes to an RGB(A) image."""
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = imread(path)
    assert image.ndim == 3 and image.shape[2] in (3, 4) and image.shape[0] > 100
