"""Shared test configuration: float64 on, and the implementations every semantic test runs on."""

import jax

jax.config.update("jax_enable_x64", True)
