"""The audio layer's one error hierarchy. The API maps these to HTTP status codes; every message
says what was wrong and where (the file, the field, the clip) so the operator can fix it."""


class AudioError(Exception):
    """Base of every error the audio layer raises."""


class VoiceError(AudioError):
    """A voice cannot be built (engine missing, no Japanese voice) or cannot say a clip."""


class PackError(VoiceError):
    """A recorded voice pack is incomplete or malformed; the message names the file and field."""


class CodecError(AudioError):
    """An audio file cannot be decoded or encoded; the message names the file."""


class DeviceError(AudioError):
    """An output device cannot be opened or fails while playing. `code` and `params` say why
    for the pages, which word it in their own language (the message is English, for logs)."""

    def __init__(self, message: str, *, code: str = "device_error",
                 params: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.params = dict(params or {})
