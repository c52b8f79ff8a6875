import sys

from pinlab.cli import main

sys.exit(main())
