"""One router per area of the API; ``console.api`` mounts them."""
