"""Image resize, crop and colour ops against tf.raw_ops, through the service.

Sizes are chosen so that sampling positions fall between, on and outside input pixels, for both
upscaling and downscaling, with each align_corners / half_pixel_centers combination TF allows.
"""
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.refusals import Fed, assert_refused_as_tf, ints
from tests.oracle import compile_and_compare, ids, rand

raw = tf.raw_ops
CORNERS = [(False, False), (True, False), (False, True)]  # (align_corners, half_pixel_centers)
SIZES = [(9, 11), (3, 2), (5, 7), (1, 1)]  # from a 5x7 image: up, down, same, to one pixel


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("corners", CORNERS, ids=str)
@pytest.mark.parametrize("op", ["ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic"])
def test_resize(client, op, corners, size):
    align_corners, half_pixel_centers = corners
    fn = getattr(raw, op)
    compile_and_compare(client, lambda x: fn(images=x, size=tf.constant(size), align_corners=align_corners,
                                             half_pixel_centers=half_pixel_centers), [rand((2, 5, 7, 3))])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float64], ids=ids)
@pytest.mark.parametrize("op", ["ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea"])
def test_resize_dtypes(client, op, dtype):
    fn = getattr(raw, op)
    compile_and_compare(client, lambda x: fn(images=x, size=tf.constant([8, 3])), [rand((1, 5, 6, 2), dtype, 0, 255)])


@pytest.mark.parametrize("size", SIZES + [(4, 5), (10, 14)], ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_resize_area(client, align_corners, size):
    compile_and_compare(client, lambda x: raw.ResizeArea(images=x, size=tf.constant(size), align_corners=align_corners),
                        [rand((2, 5, 7, 3))])


@pytest.mark.parametrize("size", [(9, 11), (3, 2)], ids=str)
@pytest.mark.parametrize("corners", CORNERS, ids=str)
def test_resize_grads(client, corners, size):
    align_corners, half_pixel_centers = corners
    attrs = dict(align_corners=align_corners, half_pixel_centers=half_pixel_centers)

    def fn(grads, image):
        return (raw.ResizeBilinearGrad(grads=grads, original_image=image, **attrs),
                raw.ResizeBicubicGrad(grads=grads, original_image=image, **attrs),
                raw.ResizeNearestNeighborGrad(grads=grads, size=tf.constant([5, 7]), **attrs))
    compile_and_compare(client, fn, [rand((2, *size, 3)), rand((2, 5, 7, 3))])


@pytest.mark.parametrize("kernel_type", ["lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle",
                                         "keyscubic", "mitchellcubic"])
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate(client, kernel_type, antialias):
    def fn(x):
        attrs = dict(kernel_type=kernel_type, antialias=antialias)
        down = raw.ScaleAndTranslate(images=x, size=tf.constant([4, 3]), scale=tf.constant([0.5, 0.45]),
                                     translation=tf.constant([0.3, -0.2]), **attrs)
        up = raw.ScaleAndTranslate(images=x, size=tf.constant([17, 9]), scale=tf.constant([2.1, 1.5]),
                                   translation=tf.constant([-1.0, 0.5]), **attrs)
        return down, up
    compile_and_compare(client, fn, [rand((1, 8, 7, 2))])


def test_scale_and_translate_grad(client):
    compile_and_compare(client, lambda g, x: raw.ScaleAndTranslateGrad(
        grads=g, original_image=x, scale=tf.constant([0.5, 1.5]), translation=tf.constant([0.3, -0.2])),
        [rand((1, 4, 10, 2)), rand((1, 8, 7, 2))])


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop_size", [(4, 5), (1, 3)], ids=str)
def test_crop_and_resize(client, method, crop_size):
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [0.5, 0.5, 0.2, 0.1], [-0.3, 0.4, 1.2, 0.6], [0.0, 0.0, 1.0, 1.0]],
                     np.float32)
    compile_and_compare(client, lambda image, boxes, box_ind: raw.CropAndResize(
        image=image, boxes=boxes, box_ind=box_ind, crop_size=tf.constant(crop_size), method=method,
        extrapolation_value=-7.0), [rand((2, 6, 9, 3)), boxes, np.array([1, 0, 1, 0], np.int32)])


def test_keras_resizing_layers(client):
    """tf.image.resize's methods, with and without antialiasing, as a graph uses them."""
    def fn(x):
        return [tf.image.resize(x, (9, 4), method=m, antialias=a)
                for m in ("bilinear", "nearest", "bicubic", "area", "lanczos3", "mitchellcubic") for a in (False, True)]
    compile_and_compare(client, fn, [rand((2, 6, 7, 3))])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=ids)
def test_rgb_hsv_round_trip(client, dtype):
    rgb = rand((4, 5, 3), dtype, 0, 1)
    rgb[0, :3] = [[0.5, 0.5, 0.5], [0.0, 0.0, 0.0], [0.2, 0.7, 0.7]]  # grey, black, a tie for the largest

    def fn(rgb, hsv):
        return raw.RGBToHSV(images=rgb), raw.HSVToRGB(images=hsv)
    compile_and_compare(client, fn, [rgb, rand((4, 5, 3), dtype, 0, 1)])


@pytest.mark.parametrize("value", [-0.7, 0.05, 0.9])
def test_color_adjustments(client, value):
    def fn(x, delta, scale, factor):
        return (raw.AdjustHue(images=x, delta=delta), raw.AdjustSaturation(images=x, scale=scale),
                raw.AdjustContrastv2(images=x, contrast_factor=factor))
    x = rand((2, 4, 5, 3), low=0, high=1)
    x[0, 0, :3] = [[0.5, 0.5, 0.5], [0.3, 0.3, 0.8], [0.9, 0.1, 0.9]]
    compile_and_compare(client, fn, [x, np.float32(value), np.float32(1 + 2 * value), np.float32(1.5 * value)])


@pytest.mark.parametrize("crop_size", [(4, 5), (1, 1)], ids=str)
def test_crop_and_resize_grads(client, crop_size):
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [0.5, 0.5, 0.2, 0.1], [-0.3, 0.4, 1.2, 0.6]], np.float32)

    def fn(grads, image, boxes, box_ind):
        return (raw.CropAndResizeGradImage(grads=grads, boxes=boxes, box_ind=box_ind,
                                           image_size=tf.constant([2, 6, 9, 3]), T=tf.float32),
                raw.CropAndResizeGradBoxes(grads=grads, image=image, boxes=boxes, box_ind=box_ind))
    compile_and_compare(client, fn, [rand((3, *crop_size, 3)), rand((2, 6, 9, 3)), boxes,
                                     np.array([1, 0, 1], np.int32)])


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

F32 = np.float32
IMAGES = np.zeros((1, 4, 4, 3), F32)

# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "resize_to_three_sizes": ("ResizeBilinear", {"images": Fed((1, 4, 4, 3)), "size": ints(2, 2, 2)}, dict(T=F32),
                              {"input": "size"}, "two positive values",
                              lambda: raw.ResizeBilinear(images=IMAGES, size=[2, 2, 2])),
    "resize_of_one_image": ("ResizeNearestNeighbor", {"images": Fed((4, 4, 3)), "size": ints(2, 2)}, dict(T=F32),
                            {"input": "images"}, "must have rank 4",
                            lambda: raw.ResizeNearestNeighbor(images=IMAGES[0], size=[2, 2])),
    "half_pixel_centers_with_aligned_corners": ("ResizeBicubic", {"images": Fed((1, 4, 4, 3)), "size": ints(2, 2)},
                                                dict(T=F32, align_corners=True, half_pixel_centers=True),
                                                {"attr": "half_pixel_centers"}, "requires align_corners=False",
                                                lambda: raw.ResizeBicubic(images=IMAGES, size=[2, 2],
                                                                          align_corners=True,
                                                                          half_pixel_centers=True)),
    "crop_boxes_of_three_columns": ("CropAndResize", {"image": Fed((1, 4, 4, 3)), "boxes": Fed((1, 3)),
                                                      "box_ind": ints(0), "crop_size": ints(2, 2)}, dict(T=F32),
                                    {"input": "boxes"}, r"\[num_boxes, 4\]",
                                    lambda: raw.CropAndResize(image=IMAGES, boxes=[[0.0, 0.0, 1.0]], box_ind=[0],
                                                              crop_size=[2, 2])),
    "crop_box_indices_of_another_length": ("CropAndResize", {"image": Fed((1, 4, 4, 3)), "boxes": Fed((1, 4)),
                                                             "box_ind": ints(0, 0), "crop_size": ints(2, 2)},
                                           dict(T=F32), {"input": "box_ind"}, "one image index per box",
                                           lambda: raw.CropAndResize(image=IMAGES, boxes=[[0.0, 0.0, 1.0, 1.0]],
                                                                     box_ind=[0, 0], crop_size=[2, 2])),
    "scale_and_translate_zero_scale": ("ScaleAndTranslate", {"images": Fed((1, 4, 4, 3)), "size": ints(2, 2),
                                                             "scale": np.array([0, 1], F32),
                                                             "translation": np.zeros(2, F32)}, dict(T=F32),
                                       {"input": "scale"}, "must be positive",
                                       lambda: raw.ScaleAndTranslate(images=IMAGES, size=[2, 2], scale=[0.0, 1.0],
                                                                     translation=[0.0, 0.0])),
    "contrast_of_a_matrix": ("AdjustContrastv2", {"images": Fed((2, 3)), "contrast_factor": F32(0.5)}, dict(T=F32),
                             {"input": "images"}, "rank at least 3",
                             lambda: raw.AdjustContrastv2(images=np.zeros((2, 3), F32), contrast_factor=0.5)),
    "saturation_scale_vector": ("AdjustSaturation", {"images": Fed((2, 2, 3)), "scale": np.ones(1, F32)},
                                dict(T=F32), {"input": "scale"}, "must have rank 0",
                                lambda: raw.AdjustSaturation(images=np.zeros((2, 2, 3), F32), scale=[1.0])),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])
