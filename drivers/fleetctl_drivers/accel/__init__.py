"""Accelerator drivers: parsers of vendor tool output (NVIDIA, MN-Core) and what runs them."""
