import sys

from minikubelet.cli import main

sys.exit(main())
