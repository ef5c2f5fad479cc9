"""Run the app in Flower's simulation engine on a SuperLink this process owns and stops."""
