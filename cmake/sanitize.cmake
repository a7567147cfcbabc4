# -DGLIM_SANITIZE=ON: ASan + UBSan, abort on the first report.
if(GLIM_SANITIZE)
    set(GLIM_SAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    add_compile_options(${GLIM_SAN_FLAGS})
    add_link_options(${GLIM_SAN_FLAGS})
endif()
