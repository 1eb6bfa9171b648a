"""XLA's own plans priced for a GPU: compile targets, the roofline model, a model's memory and step on each
card, the formula estimate, published measurements. Imports every other room."""
