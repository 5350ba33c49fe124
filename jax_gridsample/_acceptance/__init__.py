"""The checks behind ``python -m jax_gridsample``: does the package work on this machine?

The quick check (the default) compares each platform's native kernels with the float64 host
oracle in a few seconds; ``--full`` runs the hardware acceptance of an Ascend NPU or a CUDA GPU.
One module per part:

- ``_data``: tolerances, the data the checks sample and how errors are measured;
- ``_plan``: what a hardware acceptance runs (shapes, modes, dtypes) and a run's options;
- ``_platforms``: the platforms (CPU, CUDA, Ascend): their kernels, devices and particulars;
- ``_environment``: versions, toolkits (CANN, CUDA), devices and ``native_status()``;
- ``_quick``: the quick parity check of one platform;
- ``_cases``: the parity and route cases of the hardware acceptance;
- ``_checks``: its other checks (self-check, chain, coordinates, empty, NaN, collisions);
- ``_timings``: its timings, the speed verdict, and torch's in a process of its own
  (``_torch_worker``);
- ``_report``: tables, verdict lines, the JSON report and the run-time estimate;
- ``_full``: the hardware acceptance, section by section;
- ``_main``: the command line.

Only jax_gridsample, jax, numpy and the standard library are imported; torch only in the
worker process, where present.
"""
