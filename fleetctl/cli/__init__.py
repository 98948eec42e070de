"""The typer CLI: one module per noun, wired together in app.py."""
