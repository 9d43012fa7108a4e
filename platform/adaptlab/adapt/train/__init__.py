"""Adaptation training: PT, FT, PT-FT and merged models as content-addressed safetensors
artifacts, one training loop, Ray training jobs and Ray Tune sweeps. Heavy imports (torch) load
with the modules, not with this package."""
