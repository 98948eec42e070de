"""The lab: a simulated datacenter that speaks the real protocols."""
