"""Cameras and sphere geometry: pinhole cameras, equirectangular <-> perspective maps (bit-identical on every CPU), frame sampling."""
