"""The ground every measurement stands on: devices and the allocator, timing, precision presets, the hardware
table, data, what a workload counts before it runs, and HLO counts. Imports no other room."""
