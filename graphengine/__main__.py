import sys

from graphengine.cli import main

sys.exit(main())
