"""The special token ids every part of attnmt shares: SentencePiece is trained to give these
pieces these ids (data/tokenizer.py), the model pads and starts with them, search stops at EOS.
The one module of the data layer the model may import."""

PAD_ID = 0  # padding: never embedded into a state, never scored
UNK_ID = 1  # a piece the vocabulary lacks
BOS_ID = 2  # the decoder's first input
EOS_ID = 3  # ends every source and every output
EOS_PIECE = "</s>"
