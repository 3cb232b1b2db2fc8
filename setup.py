"""Build configuration for the one compiled part of Samsa (project metadata is in pyproject.toml).

samsa.protocol._recordcheck validates the records of every produced batch; `pip install -e .`
(`make install`) compiles it. Without it Samsa falls back to the pure-Python reference in
samsa/protocol/recordcheck.py and logs a warning.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "samsa.protocol._recordcheck",
            sources=["samsa/protocol/_recordcheck.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra"],
        )
    ]
)
