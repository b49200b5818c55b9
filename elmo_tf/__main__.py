"""`python -m elmo_tf`: the `elmo-tf` command (`elmo_tf_launcher.main`).

TensorFlow's start-up lines are printed as the package imports it, before this runs; the
installed `elmo-tf` (or `python -m elmo_tf_launcher`) imports it with them silenced.
"""

import sys

from elmo_tf_launcher import main

if __name__ == "__main__":
    sys.exit(main())
