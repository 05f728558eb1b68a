"""yomite's audio layer: voices (text-to-speech and recorded packs) that render clips to PCM, and
sinks that play it. Importing the package has no side effects; engines load when first used."""
