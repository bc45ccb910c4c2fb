"""R2M-Bench: relative revisit scoring of generated videos (a conditioning image, a prompt, a camera trajectory)."""
