"""PersistBench: reprojected 360-degree videos; a model renders the target view of an object that left the input view."""
