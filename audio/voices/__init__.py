"""The voices: text-to-speech engines and recorded packs, rendering clips to PCM."""
