"""Recording a voice pack in the browser (operator only): the `/record` page and its API.

The page shows each verse (text and kana), records it from the microphone, and sends the take
here; the take is checked (it decodes, it holds speech, it neither clips nor whispers), trimmed
on its own noise floor, and kept in the pack of `voice.recording_pack`, whose manifest is
updated at once: a pack in progress reads every match whose deck it covers.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from api.answers import RecordingLimits, RecordingProgress, RecordingState, TakeSaved
from api.deps import Op
from api.errors import ApiError
from api.routes.pages import page_response
from audio.errors import AudioError, PackError
from audio.voices.recording import MAX_UPLOAD_BYTES, UPLOAD_TYPES, RecordingPack, TakeRefused

router = APIRouter(tags=["recording"])


@router.get("/record", include_in_schema=False, response_class=HTMLResponse)
async def page() -> HTMLResponse:
    return page_response("record")


def pack_of(request: Request) -> RecordingPack:
    pack: RecordingPack = request.app.state.recording
    return pack


def _slot(a: str, b: str) -> str:
    slot = f"{a}/{b}"
    if len(slot) > 64:
        raise ApiError(404, "no_such_slot", f"there is no slot {slot[:64]!r}",
                       "slots are NNN/kami, NNN/shimo or call/<name>")
    return slot


def _known(pack: RecordingPack, slot: str) -> None:
    try:
        pack.slot(slot)
    except PackError as e:
        raise ApiError(404, "no_such_slot", str(e), "GET /api/recording lists the slots") \
            from None


@router.get("/api/recording", response_model=RecordingState, response_model_exclude_unset=True)
async def state(request: Request, _p: Op) -> RecordingState:
    """Every slot (text, kana, colour, recorded or not, speech length) and the progress."""
    pack = pack_of(request)
    done = await asyncio.to_thread(pack.recorded)
    return RecordingState(
        folder=str(pack.folder),
        slots=[{**s.__dict__, "recorded": s.slot in done, "speech_s": done.get(s.slot)}
               for s in pack.all_slots],
        progress=await asyncio.to_thread(pack.progress),
        limits=RecordingLimits(max_upload_bytes=MAX_UPLOAD_BYTES, types=sorted(UPLOAD_TYPES)),
    )


@router.put("/api/recording/slots/{a}/{b}", response_model=TakeSaved,
            response_model_exclude_unset=True)
async def save_take(a: str, b: str, request: Request, _p: Op) -> TakeSaved:
    """Keep the body (one take, as recorded: webm/opus, ogg, wav...) as the slot's recording.
    422 with what to do when it clips, is too quiet, holds no speech, lasts too long (decoding
    stops at the limit) or is not audio in a container a recording comes in (a playlist naming
    other files is refused unread); 413 past the size limit."""
    pack = pack_of(request)
    slot = _slot(a, b)
    _known(pack, slot)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "take_too_large", f"the take is {declared} bytes; at most "
                       f"{MAX_UPLOAD_BYTES}", "record a single verse")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_UPLOAD_BYTES:
            raise ApiError(413, "take_too_large", f"the take is over {MAX_UPLOAD_BYTES} bytes",
                           "record a single verse")
    try:
        report = await asyncio.to_thread(pack.save, slot, bytes(body),
                                         request.headers.get("content-type", ""))
    except TakeRefused as e:
        raise ApiError(422, e.code, e.detail, e.hint) from None
    except AudioError as e:
        raise ApiError(500, "take_not_saved", str(e), "check the pack folder's disk") from None
    return TakeSaved(take=report.as_dict(), progress=await asyncio.to_thread(pack.progress))


@router.get("/api/recording/slots/{a}/{b}/audio", response_class=FileResponse,
            responses={200: {"content": {"audio/flac": {}}, "description": "the take"}})
async def take_audio(a: str, b: str, request: Request, _p: Op) -> FileResponse:
    pack = pack_of(request)
    slot = _slot(a, b)
    _known(pack, slot)
    try:
        path = await asyncio.to_thread(pack.audio_path, slot)
    except PackError as e:
        raise ApiError(404, "not_recorded", str(e), "record it first") from None
    return FileResponse(path, media_type="audio/flac", headers={"Cache-Control": "no-store"})


@router.delete("/api/recording/slots/{a}/{b}", response_model=RecordingProgress,
               response_model_exclude_unset=True)
async def delete_take(a: str, b: str, request: Request, _p: Op) -> RecordingProgress:
    pack = pack_of(request)
    slot = _slot(a, b)
    _known(pack, slot)
    try:
        await asyncio.to_thread(pack.delete, slot)
    except PackError as e:
        raise ApiError(404, "not_recorded", str(e), "nothing to delete") from None
    return RecordingProgress(progress=await asyncio.to_thread(pack.progress))
