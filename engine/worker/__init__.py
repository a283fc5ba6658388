"""Computing: the runners (the real model, the simulator) and everything that touches tensors. This folder is the torch line:
no module outside engine/worker/ imports torch."""
