"""Images for learning: lossless transcoding to progressive JPEG (jpegtran), decoding to
feature vectors (Pillow), image quality (PSNR, MSSIM).  Used by the ``pcr`` format, the image
loaders, ``loom_predict_image`` and ``bench pcr``; below ``store/``, above ``codecs/``.
No paper section of its own (PCR §3.2 names the tools)."""
