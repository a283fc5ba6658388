"""The pages in headless Chromium (the browser tier)."""
