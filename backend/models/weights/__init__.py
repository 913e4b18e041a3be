"""Weights of the embedded models (a package only so the .safetensors files ship in wheels)."""
