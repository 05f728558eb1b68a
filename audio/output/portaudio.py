"""PortAudio through sounddevice: the only module that imports sounddevice, and only lazily
(inside functions): PortAudio lists the devices when sounddevice is imported, and the ALSA `pulse`
device exists only if PULSE_SERVER / XDG_RUNTIME_DIR are already set and the sound server is up at
that moment. Importing this module opens nothing. Also the output devices it lists.
"""

from dataclasses import dataclass
from types import ModuleType

from audio.errors import DeviceError


def load_sounddevice() -> ModuleType:
    """The sounddevice module (imported here, on first use, and nowhere else)."""
    try:
        import sounddevice  # type: ignore[import-untyped]
    except OSError as e:  # the PortAudio shared library itself is missing
        raise DeviceError(
            f"PortAudio is not available ({e}); install libportaudio2 (make setup does)",
            code="no_portaudio") from None
    mod: ModuleType = sounddevice
    return mod


@dataclass(frozen=True, slots=True)
class OutputDevice:
    index: int
    name: str
    hostapi: str
    channels: int
    default_rate: float
    default: bool


def list_devices() -> list[OutputDevice]:
    """Every device PortAudio can play to (for `yomite devices`)."""
    sd = load_sounddevice()
    try:
        default_out = sd.default.device[1]
        apis = sd.query_hostapis()
        devices = sd.query_devices()
    except sd.PortAudioError as e:
        raise DeviceError(f"cannot list audio devices: {e}", code="cannot_list") from None
    return [
        OutputDevice(
            index=int(d["index"]),
            name=str(d["name"]),
            hostapi=str(apis[d["hostapi"]]["name"]),
            channels=int(d["max_output_channels"]),
            default_rate=float(d["default_samplerate"]),
            default=int(d["index"]) == default_out,
        )
        for d in devices
        if d["max_output_channels"] > 0
    ]


def describe_outputs(sd: ModuleType) -> str:
    """The outputs PortAudio lists, for an error message."""
    try:
        names = [f"{d['index']}: {d['name']}" for d in sd.query_devices()
                 if d["max_output_channels"] > 0]
    except Exception:  # only for an error message: never mask the real error
        return "(the device list is unavailable)"
    return ", ".join(names) if names else "none"
