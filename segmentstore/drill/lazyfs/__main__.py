import sys

from segmentstore.drill.lazyfs.server import main

sys.exit(main(sys.argv[1:]))
