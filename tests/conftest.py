"""Root conftest: its folder (tests/) goes on sys.path, so test folders can share plain helper
modules such as tests/tiny_models.py."""
