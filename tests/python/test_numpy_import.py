"""Issue 32, finding 11: two threads that start reading before NumPy is
imported once deadlocked every time (one in numpy/__init__, one in C++
holding the GIL). Importing sluice now imports NumPy, while the import
holds the GIL."""

import subprocess
import sys

SCRIPT = """
import sys, threading
import sluice
print("numpy imported:", "numpy" in sys.modules, flush=True)
results = []
def read():
    results.append(sum(int(x) for x in sluice.Dataset.range(3000).map("square")))
def import_numpy():
    import numpy
    results.append(int(numpy.arange(10).sum()))
threads = [threading.Thread(target=read), threading.Thread(target=import_numpy), threading.Thread(target=read)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(results), flush=True)
"""


def test_two_reading_threads_and_a_numpy_import_do_not_deadlock():
    # Fresh interpreters, several times: the deadlock was a race at start.
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        squares = sum(i * i for i in range(3000))
        assert done.stdout == f"numpy imported: True\n[45, {squares}, {squares}]\n"
