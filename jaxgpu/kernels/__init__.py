"""What is measured: matrix products, STREAM and transfer, the roofline's chains, the MLP, parallel and
distributed steps, serial loops, threads, the transformer. Imports the ground and records, never pricing."""
