import sys
from pathlib import Path

# --import-mode=importlib does not put test folders on sys.path; the e2e
# helpers live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
