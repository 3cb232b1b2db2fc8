"""Build configuration for Samsa's compiled parts (project metadata is in pyproject.toml).

`pip install -e .` (`make install`) compiles both:
- samsa.protocol._recordcheck validates the records of every produced batch. Without it Samsa
  falls back to the pure-Python reference in samsa/protocol/recordcheck.py and logs a warning.
- samsa.net._tlsrecord opens TLS 1.3 records on the TLS listeners' receive path, with the
  OpenSSL (libcrypto) that Python's ssl module uses (Debian: libssl-dev to build). Without it
  OpenSSL's own record layer reads every record (slower; see samsa/net/tls_transport.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "samsa.protocol._recordcheck",
            sources=["samsa/protocol/_recordcheck.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra"],
        ),
        Extension(
            "samsa.net._tlsrecord",
            sources=["samsa/net/_tlsrecord.c"],
            libraries=["crypto"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra"],
        ),
    ]
)
