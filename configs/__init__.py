"""The experiment presets: one file per preset (`--config=configs/<name>.py`), and the
bases several of them share (`configs.bases`)."""
