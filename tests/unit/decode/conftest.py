"""The decode tests import their hand-built lattices and graphs (lattice_synth.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
