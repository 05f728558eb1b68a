"""yomite's domain and timing engine.

Pure: no asyncio, threads, audio or web imports, and no wall clock.
"""
