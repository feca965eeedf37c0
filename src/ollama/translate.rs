//! Ollama requests read and translated to OpenAI's; OpenAI answers translated back.
