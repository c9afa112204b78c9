"""qMEMO: post-quantum signatures measured two ways - a C baseline and a Python devnet.

Importing the package is cheap and touches no native library: the pure core
(`qmemo.core`) must stay importable on a machine without liboqs. Only
`qmemo.crypto` loads liboqs, and says clearly what to run when it is missing.
"""

__version__ = "0.1.0"
